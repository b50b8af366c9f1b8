/**
 * What a JobManager with `web.submit.enable: false` answers on the jar routes (checked against the
 * embedded Flink 2.1 with that setting): the REST router has no jar handlers, so a run or delete is
 * 404 "Not found: <path>", a list or plan falls through to the static-file handler (404 "Unable to
 * load requested file"), and an upload is refused by the upload handler (400 "POST request not allowed").
 */
export function isWebSubmitDisabled(status: number, body: unknown): boolean {
  const first = (body as { errors?: unknown[] })?.errors?.[0];
  if (typeof first !== 'string') return false;
  if (status === 404) return /^(?:Not found: \/(?:v1\/)?jars|Unable to load requested file \/(?:v1\/)?jars)/.test(first);
  return status === 400 && first === 'POST request not allowed';
}

/**
 * Flink puts a whole Java stack trace into `errors[0]`. Clients need the sentence, not the trace:
 * keep the first line of each exception and its "Caused by" chain, without class-name prefixes
 * that add nothing, and without `at ...` frames.
 */
export function summariseFlinkErrors(body: unknown): string {
  const errors = (body as { errors?: unknown })?.errors;
  if (!Array.isArray(errors) || errors.length === 0) return 'no error message';
  const parts: string[] = [];
  for (const raw of errors) {
    if (typeof raw !== 'string') continue;
    for (const line of raw.split('\n')) {
      const l = line.trim();
      if (
        l === '' ||
        l.startsWith('at ') ||
        /^\.\.\. \d+ more$/.test(l) ||
        l.startsWith('<Exception on server side') ||
        l.startsWith('End of exception')
      )
        continue;
      let msg = l.replace(/^Caused by: /, '');
      // Wrappers stack class names: "CompletionException: RestHandlerException: message".
      for (let prev = ''; prev !== msg; ) {
        prev = msg;
        msg = msg.replace(/^(?:[a-zA-Z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable): ?/, '');
      }
      // The JobManager's directory layout is none of the client's business.
      msg = msg.replace(/(?:\/[^\s/]+)*\/flink-web-upload\//g, '').trim();
      if (msg === '' || msg === 'Internal server error.') continue;
      if (!parts.some((p) => p.includes(msg))) parts.push(msg);
    }
  }
  const text = parts.join(' Caused by: ');
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text || 'no error message';
}

/**
 * A JobManager that is not the leader forwards a run to the leader's dispatcher over RPC; while
 * that leader is gone (killed, or an election under way) Flink answers the run with 400 "Could
 * not execute application … the recipient is unreachable" or names the missing leader. Nothing
 * ran on a leader that could not be reached, and the client's retry (same job id) is safe, so
 * the gateway answers 503 with Retry-After instead of a 400 no client retries.
 */
export function isLeaderUnreachable(flinkMessage: string): boolean {
  return /because the recipient is unreachable|remote RpcService is currently not reachable|No leader (?:is )?available|Could not retrieve the leader|leader election/i.test(
    flinkMessage,
  );
}

/**
 * The JobManager's own `errors` strings, verbatim, when `body` is Flink's error envelope (and not
 * a proxy's page the client would never have seen from Flink): attached to the gateway error that
 * translates the answer, so they follow the gateway's message in the same `errors` array.
 */
export function withFlinkErrors<E extends { upstream?: string[] }>(err: E, res: { body: unknown; notJson?: boolean }): E {
  const errors = (res.body as { errors?: unknown })?.errors;
  if (!res.notJson && Array.isArray(errors)) {
    const texts = errors.filter((e): e is string => typeof e === 'string' && e !== '');
    if (texts.length > 0) err.upstream = texts;
  }
  return err;
}

/**
 * Flink's Dispatcher refusing a job id it has (a running job, or one in its job-result store:
 * DuplicateJobSubmissionException, "Job has already been submitted.", 1.20 to 2.3).
 */
export function isDuplicateJobId(flinkMessage: string): boolean {
  return /DuplicateJobSubmissionException|Job has already been submitted/.test(flinkMessage);
}
