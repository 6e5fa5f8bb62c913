// The assertion every Node test of the wasm API uses for failures.
import assert from "node:assert/strict";

// rejectsWith asserts that promise rejects with the API's Error: code
// as given, stage and docId strings.
export async function rejectsWith(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof Error, `not an Error: ${err}`);
    assert.equal(err.code, code, `code of: ${err.message}`);
    assert.equal(typeof err.stage, "string");
    assert.equal(typeof err.docId, "string");
    return true;
  });
}
