#include "ops/channel_reduce.h"

#include <c10/util/Exception.h>

namespace roarfast {

ChannelReduce parse_channel_reduce(const std::string& name, const char* arg_name) {
  if (name == "none") return ChannelReduce::kNone;
  if (name == "sum_sq") return ChannelReduce::kSumSquares;
  if (name == "abs_sum") return ChannelReduce::kAbsSum;
  if (name == "max") return ChannelReduce::kMax;
  if (name == "value") return ChannelReduce::kValue;
  TORCH_CHECK(false, arg_name, " should be one of sum_sq, abs_sum, max, value, none; got '", name, "'");
}

}  // namespace roarfast
