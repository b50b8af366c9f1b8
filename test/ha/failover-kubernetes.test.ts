import { describeFailover, kubernetesHa } from './failover-suite';

// JobManager HA failover on Kubernetes HA (a real kube-apiserver); ZooKeeper has its own file so jest runs both at once.
describeFailover('Kubernetes', () => kubernetesHa());
