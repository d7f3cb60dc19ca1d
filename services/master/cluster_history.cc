// ClusterHistory (see cluster_history.h).
#include "services/master/cluster_history.h"

namespace regent::master {

void ClusterHistory::record(const ClusterSample& sample) {
  if (samples_.size() == kCapacity) samples_.pop_front();
  samples_.push_back(sample);
}

}  // namespace regent::master
