import { distributionSuite } from './distribution-suite';

// Flink 1.20.5: the smoke subset (CI budget; test/distribution/flink-2.3.0.test.ts runs the whole set).
distributionSuite('1.20.5', 'smoke');
