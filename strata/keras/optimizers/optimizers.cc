#include "strata/keras/optimizers/optimizers.h"

#include <algorithm>
#include <cctype>

#include "strata/base/errors.h"

namespace strata::keras::optimizers {

std::shared_ptr<Optimizer> get(const std::string& name) {
  std::string key = name;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (key == "sgd") return SGD();
  if (key == "adam") return Adam();
  if (key == "adamw") return AdamW();
  if (key == "rmsprop") return RMSprop();
  if (key == "adagrad") return Adagrad();
  STRATA_CHECK_ARG(false, "keras::optimizers::get: could not interpret optimizer identifier '",
                   name, "' (known: sgd, adam, adamw, rmsprop, adagrad)");
  return nullptr;
}

}  // namespace strata::keras::optimizers
