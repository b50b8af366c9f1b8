import { distributionSuite } from './distribution-suite';

// Flink 2.1.3: the smoke subset (CI budget; test/distribution/flink-2.3.0.test.ts runs the whole set).
distributionSuite('2.1.3', 'smoke');
