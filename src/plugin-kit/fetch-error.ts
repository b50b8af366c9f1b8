import { GatewayError } from '../errors/gateway-error';
import { redactUri } from './uri';

/**
 * Helpers for plugins translating their SDK's failures. `detail` must be a short, credential-free
 * description (an HTTP status and the store's error code, e.g. "403 AuthorizationFailure").
 */
export const fetchError = {
  notFound: (uri: URL, detail: string) => new GatewayError('GW_FETCH_NOT_FOUND', { uri: redactUri(uri), detail }),
  denied: (uri: URL, plugin: string, detail: string) => new GatewayError('GW_FETCH_DENIED', { uri: redactUri(uri), plugin, detail }),
  unavailable: (uri: URL, detail: string, cause?: unknown) =>
    new GatewayError('GW_FETCH_UNAVAILABLE', { uri: redactUri(uri), detail }, cause === undefined ? undefined : { cause }),
  changed: (uri: URL, detail: string) => new GatewayError('GW_FETCH_CHANGED', { uri: redactUri(uri), detail }),
  invalid: (uri: URL | string, reason: string) => new GatewayError('GW_FETCH_URI_INVALID', { uri: redactUri(uri), reason }),
};
