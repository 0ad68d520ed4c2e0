// Several GPUs: one eval worker process per device, each pinned to its device through
// CUDA_VISIBLE_DEVICES, judging the candidates of a batch in parallel through core/parallel.hpp.
// Each candidate runs on one device, paired with the baseline on that same device, so that its
// speed-up is a same-GPU ratio.
#pragma once
#include <string>
#include <vector>

namespace kforge {

// "--devices": a comma list of device indices ("0,2"), or "all" (every device kforge sees).
// Indices count the devices visible to kforge (after any CUDA_VISIBLE_DEVICES of its own). A usage
// error on a malformed list, a repeated index, or, where a GPU is present, an index past the last
// device. Empty spec: empty list (the default device, one worker).
std::vector<int> parse_devices(const std::string& spec);

// A usage error when a device list is given together with a --device other than "cuda" (the
// list picks the GPUs itself).
void require_default_device(const std::vector<int>& devices, const std::string& device);

// The environment entry that pins a worker to `device` (an index as above): CUDA_VISIBLE_DEVICES
// naming that device, translated through kforge's own CUDA_VISIBLE_DEVICES when it has one.
std::string device_env(int device);

}  // namespace kforge
