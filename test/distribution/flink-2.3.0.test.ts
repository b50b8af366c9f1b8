import { distributionSuite } from './distribution-suite';

// Flink 2.3.0, the newest line: the whole set, including run-application (FLIP-549) and the Web UI.
distributionSuite('2.3.0', 'full');
