import { summariseFlinkErrors } from '../../../src/cluster/flink-errors';

describe('summariseFlinkErrors', () => {
  it('keeps the messages of a Java stack trace and its causes', () => {
    const trace = [
      'org.apache.flink.runtime.rest.handler.RestHandlerException: Could not execute application.',
      '\tat org.apache.flink.runtime.webmonitor.handlers.JarRunHandler.lambda$handleRequest$1(JarRunHandler.java:114)',
      'Caused by: org.apache.flink.client.program.ProgramInvocationException: The main method caused an error: boom',
      '\tat org.apache.flink.client.program.PackagedProgram.callMainMethod(PackagedProgram.java:373)',
      '\t... 12 more',
    ].join('\n');
    expect(summariseFlinkErrors({ errors: [trace] })).toBe(
      'Could not execute application. Caused by: The main method caused an error: boom',
    );
  });

  it("drops Flink's generic 500 wrapper", () => {
    const body = {
      errors: [
        'Internal server error.',
        '<Exception on server side:\njava.util.concurrent.CompletionException: org.apache.flink.runtime.rest.handler.RestHandlerException: Jar file /tmp/x/y.jar does not exist\n\tat a.b(C.java:1)\nEnd of exception on server side>',
      ],
    };
    expect(summariseFlinkErrors(body)).toContain('Jar file /tmp/x/y.jar does not exist');
    expect(summariseFlinkErrors(body)).not.toContain('Internal server error');
  });
});

describe('summariseFlinkErrors on stacked wrappers', () => {
  it('strips every class-name prefix, the upload directory and repeated causes', () => {
    const body = {
      errors: [
        'Internal server error.',
        '<Exception on server side:\njava.util.concurrent.CompletionException: org.apache.flink.runtime.rest.handler.RestHandlerException: Jar file /tmp/a/flink-web-upload/0000_missing.jar does not exist\n\tat x.y(Z.java:1)\nCaused by: org.apache.flink.runtime.rest.handler.RestHandlerException: Jar file /tmp/a/flink-web-upload/0000_missing.jar does not exist\nEnd of exception on server side>',
      ],
    };
    expect(summariseFlinkErrors(body)).toBe('Jar file 0000_missing.jar does not exist');
  });
});
