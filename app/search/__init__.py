"""Swap search: BM25 in PostgreSQL, LLM rerank, and the decisions behind them.

Pipeline (`service.search`): user text -> `query.query_terms` (never tsquery syntax) ->
the tenant's `to_tsvector` gives stemmed lexemes -> BM25 top 50 over the scope in SQL
(`repository`, defined by the reference `bm25.py`) -> optional LLM rerank of those 50
(`rerank.py`; cached in Redis by query + candidate set) -> top `limit` (default 10,
max 20).

Decisions where the spec is silent:
* IDF is Lucene's `ln(1 + (N - n + 0.5) / (n + 0.5))` (never negative); k1 = 1.2 and
  b = 0.75 are settings (`LOOM_SEARCH_BM25_K1`, `LOOM_SEARCH_BM25_B`). Query lexemes
  count once however often they are repeated. A document is a message with at least
  one lexeme; |d| counts lexeme positions (stop words excluded); N, avgdl and df are
  over the searched scope (session, agent or tenant), so scores depend on the scope.
* Text search configuration: per tenant (`tenants.text_search_config`, `english` by
  default, `simple` for languages the English stemmer would mangle); queries are parsed
  with the same configuration their messages were indexed with.
* Queries are capped at 1,000 characters / 32 distinct words; the API refuses more
  than 10,000 characters (422). Punctuation, quotes and operators are plain text.
  An empty or stop-word-only query is an empty 200, without touching the index.
* Ties go to the newer message. The LLM's omissions rank after every scored candidate
  (in BM25 order, `rerank_score: null`); duplicate indexes keep the first score.
* Rerank failures of any kind (no LLM, error, timeout `LOOM_SEARCH_RERANK_TIMEOUT_SECONDS`,
  unusable answer) give BM25 order and `reranked: false`; never an error.
* Promotion from a search (`promote: true`) promotes only the hits of the session
  itself (agent/tenant-scope hits from other sessions are not copied across sessions);
  the HTTP endpoint answers 409 when they would not fit, the agent tool still returns
  the results and reports `promote_error`.
"""
