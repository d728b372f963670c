// A program outside the tree, built against the installed package: tensors,
// a mirrored variable, a Keras model and a MultiWorkerMirroredStrategy in
// single-worker mode (which pulls in the collectives and Gloo).
#include <strata/keras/keras.h>
#include <strata/strata.h>

#include <iostream>

int main() {
  namespace tf = strata;
  namespace sd = strata::distribute;
  tf::Tensor t = tf::constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
  std::cout << t << "\n";
  sd::MultiWorkerMirroredStrategy strategy(
      {.cluster_resolver = std::make_shared<sd::cluster_resolver::SimpleClusterResolver>(
           tf::train::ClusterSpec(std::vector<tf::train::ClusterSpec::Job>{}))});
  tf::Variable v;
  {
    auto scope = strategy.scope();
    auto model = tf::keras::Sequential({tf::keras::layers::Dense(2, {.input_shape = {5}})});
    v = model->trainable_variables().front();
  }
  std::cout << strategy.num_replicas_in_sync()
            << " replica(s); kernel mirrored: " << sd::is_mirrored_variable(v) << "\n";
  return t.num_elements() == 4 && sd::is_mirrored_variable(v) ? 0 : 1;
}
