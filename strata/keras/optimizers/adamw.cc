#include "strata/keras/optimizers/adamw.h"

#include <cmath>

#include "strata/base/errors.h"

namespace strata::keras::optimizers {

AdamWOptimizer::AdamWOptimizer(const AdamWOptions& o)
    : AdamOptimizer("AdamW", o.learning_rate, o.beta_1, o.beta_2, o.epsilon, o.amsgrad,
                    {.weight_decay = o.weight_decay,
                     .clipnorm = o.clipnorm,
                     .clipvalue = o.clipvalue,
                     .global_clipnorm = o.global_clipnorm,
                     .name = o.name}) {
  STRATA_CHECK_ARG(!std::isnan(o.weight_decay),
                   "AdamWOptions.weight_decay must be a number, got nan");
}

std::shared_ptr<AdamWOptimizer> AdamW(const AdamWOptions& options) {
  return std::make_shared<AdamWOptimizer>(options);
}

}  // namespace strata::keras::optimizers
