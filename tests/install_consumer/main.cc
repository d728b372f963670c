// A program outside the tree, built against the installed package.
#include <strata/strata.h>

#include <iostream>

int main() {
  namespace tf = strata;
  tf::Tensor t = tf::constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
  std::cout << t << "\n";
  return t.num_elements() == 4 ? 0 : 1;
}
