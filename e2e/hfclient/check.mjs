// The official Hugging Face Hub JS client against Nimbus (e2e/hf_test.go runs it):
//
//	node check.mjs HUB_URL TOKEN MODEL_ID FILE SHA256
//
// It reads the model info, lists the files, checks that FILE exists (and that a missing one does
// not), downloads FILE and compares its sha256 with SHA256; it prints one JSON line and exits 0
// when everything matched.
import { createHash } from "node:crypto";
import { downloadFile, fileExists, listFiles, modelInfo } from "@huggingface/hub";

const [hubUrl, token, model, file, want] = process.argv.slice(2);
if (!want) {
	console.error("usage: node check.mjs HUB_URL TOKEN MODEL_ID FILE SHA256");
	process.exit(2);
}

// @huggingface/hub refuses access tokens that do not start with "hf_" (checkCredentials); its
// fetch option is the documented way to set headers, so the deploy token goes in that way.
const authed = (url, init = {}) =>
	fetch(url, { ...init, headers: { ...(init.headers ?? {}), Authorization: `Bearer ${token}` } });
const opts = { repo: model, hubUrl, fetch: authed };

function fail(msg) {
	console.error(`FAIL: ${msg}`);
	process.exit(1);
}

async function main() {
	const info = await modelInfo({ name: model, hubUrl, fetch: authed, additionalFields: ["sha", "siblings"] });
	if (info.name !== model || !/^[0-9a-f]{40}$/.test(info.sha ?? "")) fail(`model info ${JSON.stringify(info)}`);

	const files = [];
	for await (const f of listFiles(opts)) files.push(f);
	const entry = files.find((f) => f.path === file);
	if (!entry || entry.type !== "file" || entry.lfs?.oid !== want) fail(`listFiles ${JSON.stringify(files)}`);

	if (!(await fileExists({ ...opts, path: file }))) fail(`fileExists(${file}) is false`);
	if (await fileExists({ ...opts, path: "no-such-file.bin" })) fail("fileExists(no-such-file.bin) is true");

	const blob = await downloadFile({ ...opts, path: file });
	if (!blob) fail(`downloadFile(${file}) is null`);
	const bytes = Buffer.from(await blob.arrayBuffer());
	const got = createHash("sha256").update(bytes).digest("hex");
	if (got !== want) fail(`downloaded ${bytes.length} bytes with sha256 ${got}, want ${want}`);
	if (bytes.length !== entry.size) fail(`downloaded ${bytes.length} bytes, listFiles said ${entry.size}`);

	if ((await downloadFile({ ...opts, path: "no-such-file.bin" })) !== null) fail("downloadFile of a missing file is not null");

	console.log(JSON.stringify({ ok: true, sha: info.sha, files: files.length, size: bytes.length, sha256: got }));
}

// A failing call is reported with its HTTP status (HubApiError.statusCode), which the Go test
// reads, and the server's error code.
main().catch((e) => {
	console.error(`FAIL: status=${e?.statusCode ?? "none"} ${JSON.stringify(e?.data ?? null)} ${e?.message ?? e}`);
	process.exit(1);
});
