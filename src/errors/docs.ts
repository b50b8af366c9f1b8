import { ERROR_CODES, type ErrorSpec } from './codes';
import { STARTUP_CODES } from './startup-codes';

/** docs/errors.md, generated from the registry so the two cannot drift. */
export function errorsMarkdown(): string {
  const lines = [
    '# Error codes',
    '',
    '<!-- Generated from src/errors/codes.ts by `npm run docs:errors`; a test fails when it is stale. -->',
    '',
    'On Flink paths every error body is exactly `{"errors": ["<CODE>: <message>"]}` — Flink\'s envelope, which',
    "Flink's Java client recognises only when `errors` is the single key. The code is stable; the message says what",
    'failed, why and what to do. Codes are never reused for another meaning.',
    '',
    '| Code | HTTP | Message template |',
    '| --- | --- | --- |',
  ];
  for (const [code, spec] of Object.entries(ERROR_CODES)) {
    lines.push(
      `| \`${code}\`${(spec as ErrorSpec).retired ? ' (retired)' : ''} | ${spec.status} | ${spec.template.replace(/\|/g, '\\|')} |`,
    );
  }
  lines.push(
    '',
    '## Start-up failures and exit codes',
    '',
    'A gateway that cannot start prints one line `flink-jar-gateway: <CODE>: <message>` on stderr (for',
    '`GW_CONFIG_INVALID`, followed by one line per problem: `  - <key> (from <source>): <what to do>`) and exits',
    'with the code below. Exit 0: stopped on SIGTERM/SIGINT after draining, or `--help`/`--print-*-docs`.',
    'Exit 2: the configuration is wrong — change it and start again. Exit 1: the configuration was accepted and',
    'something at run time failed (retrying may help). The checks run before anything is started.',
    '',
    '| Code | Exit | Meaning |',
    '| --- | --- | --- |',
  );
  for (const [code, spec] of Object.entries(STARTUP_CODES)) {
    lines.push(`| \`${code}\` | ${spec.exit} | ${spec.meaning.replace(/\|/g, '\\|')} |`);
  }
  lines.push('');
  return lines.join('\n');
}
