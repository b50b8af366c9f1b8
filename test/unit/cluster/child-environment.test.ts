import { childEnvironment } from '../../../src/cluster/embedded-cluster';

/** Job code runs in the embedded JVM and can read its environment. */
describe("the embedded JVM's environment", () => {
  it("holds what a JVM needs and none of the gateway's options or cloud credentials", () => {
    const env = childEnvironment({
      PATH: '/usr/bin',
      HOME: '/home/gw',
      JAVA_HOME: '/opt/java',
      LANG: 'C.UTF-8',
      FLINK_GATEWAY_S3_SECRET_KEY: 'canary-1',
      AWS_SECRET_ACCESS_KEY: 'canary-2',
      AZURE_CLIENT_SECRET: 'canary-3',
      AZURE_FEDERATED_TOKEN_FILE: '/var/run/secrets/token',
      GATEWAY_TOKEN: 'canary-4',
      NODE_OPTIONS: '--require /x.js',
    });
    expect(env).toEqual({ PATH: '/usr/bin', HOME: '/home/gw', JAVA_HOME: '/opt/java', LANG: 'C.UTF-8' });
  });
});
