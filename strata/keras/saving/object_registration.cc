#include "strata/keras/saving/object_registration.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"

namespace strata::keras::saving {
namespace {

struct Registration {
  std::string class_name;
  LayerFactory factory;
};

class Registry {
 public:
  void add(const std::string& registered_name, const std::string& class_name,
           LayerFactory factory) {
    MutexLock lock(mu_);
    by_registered_name_[registered_name] = Registration{class_name, std::move(factory)};
  }
  std::optional<LayerFactory> by_registered_name(const std::string& registered_name) const {
    MutexLock lock(mu_);
    auto it = by_registered_name_.find(registered_name);
    if (it == by_registered_name_.end()) return std::nullopt;
    return it->second.factory;
  }
  // The registered name of the only registration of `class_name`, if exactly one.
  std::optional<std::string> unique_registered_name(const std::string& class_name) const {
    MutexLock lock(mu_);
    std::optional<std::string> found;
    for (const auto& [registered, r] : by_registered_name_) {
      if (r.class_name != class_name) continue;
      if (found) return std::nullopt;
      found = registered;
    }
    return found;
  }
  void clear() {
    MutexLock lock(mu_);
    by_registered_name_.clear();
  }

 private:
  mutable Mutex mu_;
  std::map<std::string, Registration> by_registered_name_ STRATA_GUARDED_BY(mu_);
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: used until exit
  return *r;
}

std::optional<LayerFactory> in_custom_objects(const CustomObjects& custom_objects,
                                              const std::string& name) {
  if (name.empty()) return std::nullopt;
  auto it = custom_objects.find(name);
  if (it == custom_objects.end()) return std::nullopt;
  return it->second;
}

}  // namespace

void register_keras_serializable(const std::string& package, const std::string& name,
                                 LayerFactory from_config) {
  STRATA_CHECK_ARG(!package.empty() && package.find('>') == std::string::npos,
                   "register_keras_serializable: expected a package name without '>', got \"",
                   package, "\"");
  STRATA_CHECK_ARG(!name.empty() && name.find('>') == std::string::npos,
                   "register_keras_serializable: expected a class name without '>', got \"", name,
                   "\"");
  STRATA_CHECK_ARG(from_config != nullptr, "register_keras_serializable(\"", package, "\", \"",
                   name, "\"): expected a from_config function, got an empty one");
  registry().add(package + ">" + name, name, std::move(from_config));
}

void register_keras_serializable(const std::string& name, LayerFactory from_config) {
  register_keras_serializable("Custom", name, std::move(from_config));
}

std::string get_registered_name(const std::string& class_name) {
  return registry().unique_registered_name(class_name).value_or(class_name);
}

std::optional<LayerFactory> get_registered_object(const std::string& name,
                                                  const CustomObjects& custom_objects) {
  if (auto f = in_custom_objects(custom_objects, name)) return f;
  return registry().by_registered_name(name);
}

void clear_registered_objects_for_testing() { registry().clear(); }

namespace internal {

std::optional<LayerFactory> find_layer_factory(const std::string& class_name,
                                               const std::string& registered_name,
                                               const CustomObjects& custom_objects, bool builtin) {
  if (auto f = in_custom_objects(custom_objects, registered_name)) return f;
  if (auto f = in_custom_objects(custom_objects, class_name)) return f;
  if (!registered_name.empty()) {
    if (auto f = registry().by_registered_name(registered_name)) return f;
  }
  if (auto f = registry().by_registered_name(class_name)) return f;
  if (builtin) return std::nullopt;
  if (auto unique = registry().unique_registered_name(class_name))
    return registry().by_registered_name(*unique);
  return std::nullopt;
}

}  // namespace internal
}  // namespace strata::keras::saving
