import { distributionSuite } from './distribution-suite';

// Flink 2.0.2: the smoke subset (CI budget; test/distribution/flink-2.3.0.test.ts runs the whole set).
distributionSuite('2.0.2', 'smoke');
