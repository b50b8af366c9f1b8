/** A URI fit for messages and logs: no userinfo, no query string, no fragment. */
export function redactUri(uri: string | URL): string {
  try {
    const u = typeof uri === 'string' ? new URL(uri) : uri;
    // Userinfo, query (SAS tokens, presigned signatures) and fragment are dropped on purpose.
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '<unparseable URI>';
  }
}
