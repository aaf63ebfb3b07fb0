// hoop::dp::DataParallel: the public face of DataParallelImpl.
#include "dp/data_parallel_impl.h"

namespace hoop::dp {

DataParallel::DataParallel(std::shared_ptr<Communicator> comm, DpConfig config)
    : impl_(std::make_unique<detail::DataParallelImpl>(std::move(comm), std::move(config))) {}
DataParallel::~DataParallel() = default;

int DataParallel::register_param(const std::string& name, size_t numel, int layer,
                                 const float* initial) {
  return impl_->register_param(name, std::vector<size_t>{numel}, layer, initial);
}
int DataParallel::register_param(const std::string& name, const std::vector<size_t>& shape,
                                 int layer, const float* initial) {
  return impl_->register_param(name, shape, layer, initial);
}
void DataParallel::register_comm_hook(std::shared_ptr<CommHook> hook) {
  impl_->register_comm_hook(std::move(hook));
}
void DataParallel::finalize() { impl_->finalize(); }
const float* DataParallel::layer_params(int layer, Phase phase) {
  return impl_->layer_params(layer, phase);
}
void DataParallel::release_layer(int layer, Phase phase) { impl_->release_layer(layer, phase); }
void DataParallel::layer_grads(int layer, const float* grads) { impl_->layer_grads(layer, grads); }
void DataParallel::step() { impl_->step(); }
std::vector<float> DataParallel::gather_tensor(int tensor) { return impl_->gather_tensor(tensor); }
void DataParallel::save(const std::string& dir) { impl_->save(dir); }
void DataParallel::load(const std::string& dir) { impl_->load(dir); }

int DataParallel::stage() const { return impl_->cfg_.stage; }
int DataParallel::rank() const { return impl_->rank_; }
int DataParallel::world_size() const { return impl_->nranks_; }
size_t DataParallel::num_tensors() const { return impl_->layout_.tensors.size(); }
size_t DataParallel::num_params() const { return impl_->layout_.numel; }
size_t DataParallel::shard_elements() const { return impl_->layout_.shard; }
uint64_t DataParallel::steps_done() const { return impl_->steps_; }
const std::vector<BucketInfo>& DataParallel::buckets() const { return impl_->bucket_info_; }
size_t DataParallel::buckets_launched() const { return impl_->launch_order_.size(); }
const std::vector<int>& DataParallel::launch_order() const { return impl_->launch_order_; }
MemoryReport DataParallel::memory() const { return impl_->ledger_.report(); }
double DataParallel::model_state_formula_bytes() const {
  return model_state_bytes_formula(impl_->cfg_.stage, static_cast<double>(impl_->layout_.numel),
                                   impl_->nranks_,
                                   state_bytes(impl_->cfg_.precision, impl_->cfg_.optimizer));
}
CommTiming DataParallel::last_step_comm() const { return impl_->last_timing_; }
uint64_t DataParallel::bytes_sent() const {
  if (!impl_->comm_) return 0;
  return impl_->comm_->stats().bytes_sent + (impl_->hook_ ? impl_->hook_->bytes_sent() : 0);
}

}  // namespace hoop::dp
