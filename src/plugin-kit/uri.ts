/** A URI fit for messages and logs: no userinfo, no query string, no fragment. */
export function redactUri(uri: string | URL): string {
  try {
    const u = typeof uri === 'string' ? new URL(uri) : uri;
    // Userinfo, query (SAS tokens, presigned signatures) and fragment are dropped on purpose —
    // except that Azure's wasb(s)/abfs(s) URIs carry the container, not a credential, there.
    const container = /^(wasbs?|abfss?):$/.test(u.protocol) && u.username && !u.password ? `${u.username}@` : '';
    return `${u.protocol}//${container}${u.host}${u.pathname}`;
  } catch {
    return '<unparseable URI>';
  }
}
