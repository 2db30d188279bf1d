"""What the LLM cost, per tenant: `GET /v1/usage` reads the cost ledger that
`app.llm.usage` writes, and `/v1/tenants/{id}/budget` sets a tenant's daily token budget.
When a raised budget (or a new day) leaves room again, the fact extractions that waited
for it are queued (`service.resume_waiting`)."""
