import { describeFailover, zookeeperHa } from './failover-suite';

// JobManager HA failover on ZooKeeper; the Kubernetes engine has its own file so jest runs both at once.
describeFailover('ZooKeeper', (home) => zookeeperHa(home));
