// Parsing of the channel-reduction names that the schemas take as strings.
#pragma once

#include <string>

#include "ops/channel_reduce_math.h"

namespace roarfast {

// "sum_sq" | "abs_sum" | "max" | "value" | "none"; anything else is an error naming the choices.
ChannelReduce parse_channel_reduce(const std::string& name, const char* arg_name);

}  // namespace roarfast
