// expect-error: an object must be a model
// fx::checkpoint holds models, optimizers, variables, integers and generators; a learning-rate
// schedule (or anything else) is refused when the program compiles, naming what it accepts.
#include <fluxion/checkpoint.hpp>
#include <fluxion/fluxion.hpp>
int main() {
  fluxion::optim::exponential_decay schedule{0.1, 1000, 0.96};
  fluxion::checkpoint ckpt{{"schedule", schedule}};
  ckpt.save("ckpt/model");
}
