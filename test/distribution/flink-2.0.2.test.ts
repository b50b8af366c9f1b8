import { distributionSuite } from './distribution-suite';

// Flink 2.0.2's own distribution: the whole set (the matrix fits the CI budget; 'smoke' is the
// fallback level should it stop fitting).
distributionSuite('2.0.2', 'full');
