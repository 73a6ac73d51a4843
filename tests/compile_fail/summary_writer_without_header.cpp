// expect-error: fluxion::io::summary_writer log.* incomplete type|incomplete type .fluxion::summary_writer.
// fx::summary_writer used with only the umbrella header: g++ and clang say the type is incomplete; clang adds
// a note at its declaration in the umbrella, whose comment names <fluxion/tensorboard.hpp>.
#include <fluxion/fluxion.hpp>
int main() {
  fluxion::summary_writer log{"runs/x"};
  log.scalar("loss", 1.0, 0);
}
