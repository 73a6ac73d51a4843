// expect-error: ("sequential \(nested model\)"}.*"input extent"}, 128,.*"extent"}, 64>|check_extents<false, .*, 128, .*, 64>::value).*fluxion::nn::sequential: a nested model gets input of another shape than its fluxion::nn::input declares
// (g++ names the layer in check_extents' arguments; clang 14 prints them as character codes.)
// A head that expects 64 features after a trunk that makes 128: a dense<10> fed the wrong width.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  using head = nn::sequential_t<nn::input<64>, nn::dense<10>>;
  auto net = nn::sequential(nn::input<784>{}, nn::dense<128>{}, head{});
  (void)net;
}
