import { captureJobGraph } from '../../helpers/job-graph-capture';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { DIST_VERSIONS, wordCountJarFor } from '../../helpers/flink-dist';

/** Flink's own WordCount straight from the Maven cache (2.3.0's runs its main() on every 2.x client). */
const wordCount = (version: string) =>
  version.startsWith('1.')
    ? wordCountJarFor(version)
    : join(homedir(), '.m2/repository/org/apache/flink/flink-examples-streaming/2.3.0/flink-examples-streaming-2.3.0-WordCount.jar');
import { readJobGraph } from '../../../src/submission/job-graph/job-graph-reader';

/**
 * @lane jvm (each Flink line's own CLI runs).
 * The job graph reader on graphs that each supported Flink line's own client wrote: `flink run` of
 * its distribution against a recorder standing in for the JobManager. The JobGraph's fields changed
 * across the lines (2.0 added initialClientHeartbeatTimeout, 2.3 applicationId; 1.20's
 * Configuration has standardYaml); the job id and the -D job-scoped keys come out of each.
 */
describe.each(DIST_VERSIONS)("job graphs written by Flink %s's own client", (version) => {
  it('yields the job id and the -D keys of the job configuration, reading no class', async () => {
    const fixed = version.startsWith('1.') ? '0123456789abcdef0123456789abcdef' : 'fedcba9876543210fedcba9876543210';
    const captured = await captureJobGraph(version, wordCount(version), {
      'security.delegation.job.team-store.bucket': 'team-a',
      '$internal.pipeline.job-id': fixed,
      'pipeline.max-parallelism': '64',
      'execution.checkpointing.interval': '10 s',
    });
    const graph = readJobGraph(captured.graph);
    expect(graph.jobId).toBe(fixed);
    // Flink 2.x's client sends a streaming job's StreamGraph (the JobManager compiles it), 1.20 a JobGraph.
    expect(graph.graphClass).toBe(
      version.startsWith('1.') ? 'org.apache.flink.runtime.jobgraph.JobGraph' : 'org.apache.flink.streaming.api.graph.StreamGraph',
    );
    // Typed values as Flink prints them back: a Duration in a unit Flink parses, an int as digits.
    expect(graph.configuration).toMatchObject({
      'security.delegation.job.team-store.bucket': 'team-a',
      'pipeline.max-parallelism': '64',
      'execution.checkpointing.interval': '10000 ms',
      'parallelism.default': '1',
      'execution.runtime-mode': 'STREAMING',
    });
    // 2.3 carries the application id field; `flink run` of a session job leaves it unset.
    expect(graph.applicationId).toBeUndefined();
  }, 240_000);
});
