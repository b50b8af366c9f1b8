import { distributionSuite } from './distribution-suite';

// Flink 1.20.5's own distribution: the whole set (the matrix fits the CI budget; 'smoke' is the
// fallback level should it stop fitting).
distributionSuite('1.20.5', 'full');
