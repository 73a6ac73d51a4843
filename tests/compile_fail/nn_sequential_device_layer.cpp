// expect-error: fluxion::nn::sequential: a layer of this model does not say that it runs off the cpu
// A layer of the user's own that does not say it runs on other devices (device_generic), in a
// model declared on the GPU.
#include <fluxion/nn.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
struct cube : nn::stateless_layer<cube> {
  static constexpr const char* base_name = "cube";
  static constexpr bool elementwise = true;
  template <fx::index_t... D>
  static nn::static_shape<D...> output_shape(nn::static_shape<D...>);
  cube() : stateless_layer<cube>(base_name) {}
  template <class X>
  auto operator()(X&& x, bool = false) const { return fx::tensor<float>(x * x * x); }
};
int main() {
  auto net = nn::sequential(nn::input<8>::on<fx::cuda>{}, nn::dense<4>{}, cube{}, nn::dense<2>{});
  (void)net;
}
