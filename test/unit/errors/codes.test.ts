import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES } from '../../../src/errors/codes';
import { errorsMarkdown } from '../../../src/errors/docs';
import { errorBody, GatewayError, isGatewayError } from '../../../src/errors/gateway-error';

describe('error registry', () => {
  it('uses GW_<AREA>_<WHAT> codes with HTTP error statuses', () => {
    for (const [code, spec] of Object.entries(ERROR_CODES)) {
      expect(code).toMatch(/^GW_[A-Z]+_[A-Z_]+$/);
      expect(spec.status).toBeGreaterThanOrEqual(400);
      expect(spec.status).toBeLessThan(600);
    }
  });

  it("renders Flink's envelope with the code first and nothing else", () => {
    const err = new GatewayError('GW_UPLOAD_FILE_COUNT', { count: 2 });
    expect(errorBody(err)).toEqual({ errors: ['GW_UPLOAD_FILE_COUNT: Exactly 1 file must be sent, received 2.'] });
    expect(isGatewayError(err)).toBe(true);
    expect(isGatewayError(new Error('x'))).toBe(false);
  });
});

describe('docs/errors.md', () => {
  it('is generated from the registry (run npm run docs:errors)', () => {
    expect(readFileSync(join(__dirname, '..', '..', '..', 'docs', 'errors.md'), 'utf8')).toBe(errorsMarkdown());
  });
});

describe('error bodies', () => {
  it('are well-formed JSON even when a message quotes client input with lone surrogates (schemathesis found one)', () => {
    const err = new GatewayError('GW_REQUEST_MALFORMED', {
      type: 'EmptyRequestBody',
      reason: `the body is not valid JSON (Unexpected token '\uD83D' ...)`,
    });
    const text = JSON.stringify(errorBody(err));
    expect(text).not.toMatch(/\\ud83d/i);
    expect(errorBody(err).errors[0]).toContain('\uFFFD');
  });
});
