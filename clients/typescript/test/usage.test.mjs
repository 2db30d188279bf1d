// What the LLM cost (issue 47): the usage report and a tenant's daily token budget.
// Against the live server (no LLM there: the report is empty; the budget is set by an admin).
import assert from "node:assert/strict";
import { test } from "node:test";

import { admin, client } from "./helpers.mjs";

test("the usage report and the budget round-trip", async () => {
  const loom = client();
  const report = await loom.getUsage({ group_by: "purpose" });
  assert.equal(report.group_by, "purpose");
  assert.deepEqual(report.items, []);
  assert.equal(report.total.calls, 0);
  assert.equal(report.budget.source, "none");
  const tenantId = report.budget.tenant_id;
  const root = admin();
  const set = await root.setBudget(tenantId, 1000);
  assert.equal(set.daily_tokens, 1000);
  assert.equal(set.source, "tenant");
  assert.equal(set.spent, false);
  assert.equal((await loom.getBudget(tenantId)).daily_tokens, 1000);
  assert.equal((await root.resetBudget(tenantId)).source, "none");
});
