// expect-error: fluxion::losses: logits and predictions must be float or double tensors
#include <fluxion/losses.hpp>
int main() {
  const fluxion::tensor<int> logits = {{1, 2}, {3, 4}};
  auto loss = fluxion::losses::mean_squared_error(logits, logits);
  (void)loss;
}
