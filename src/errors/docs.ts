import { ERROR_CODES, type ErrorSpec } from './codes';

/** docs/errors.md, generated from the registry so the two cannot drift. */
export function errorsMarkdown(): string {
  const lines = [
    '# Error codes',
    '',
    '<!-- Generated from src/errors/codes.ts by `npm run docs:errors`; a test fails when it is stale. -->',
    '',
    "On Flink paths every error body is exactly `{\"errors\": [\"<CODE>: <message>\"]}` — Flink's envelope, which",
    "Flink's Java client recognises only when `errors` is the single key. The code is stable; the message says what",
    'failed, why and what to do. Codes are never reused for another meaning.',
    '',
    '| Code | HTTP | Message template |',
    '| --- | --- | --- |',
  ];
  for (const [code, spec] of Object.entries(ERROR_CODES)) {
    lines.push(`| \`${code}\`${(spec as ErrorSpec).retired ? ' (retired)' : ''} | ${spec.status} | ${spec.template.replace(/\|/g, '\\|')} |`);
  }
  lines.push('');
  return lines.join('\n');
}
