#include "../test_util.hpp"

#include <functional>
#include <map>

// einsum against a naive loop over every label's values, for matmuls, batches, broadcasting
// ellipses, outer products, sums of one operand's own labels, transposes and implicit outputs;
// and its errors.

namespace {

/// einsum by brute force: every combination of label values, each product added to its output.
/// Labels are single letters; `...` is not handled here (those specs are checked against matmul).
std::vector<double> naive_einsum(const std::string& in0, const std::string& in1, const std::string& out,
                                 const fx::tensor<double>& a, const fx::tensor<double>* b) {
  std::map<char, fx::index_t> extent;
  for (std::size_t i = 0; i < in0.size(); ++i) extent[in0[i]] = a.shape()[static_cast<int>(i)];
  for (std::size_t i = 0; b && i < in1.size(); ++i) extent[in1[i]] = b->shape()[static_cast<int>(i)];
  std::vector<char> labels;
  for (const auto& [l, e] : extent) labels.push_back(l);
  fx::index_t out_size = 1;
  for (char l : out) out_size *= extent[l];
  std::vector<double> result(static_cast<std::size_t>(out_size), 0.0);
  const auto av = a.to_vector();
  const auto bv = b ? b->to_vector() : std::vector<double>{};
  std::map<char, fx::index_t> value;
  auto flat = [&](const std::string& term, const fx::shape& s) {
    fx::index_t f = 0;
    for (std::size_t i = 0; i < term.size(); ++i) f = f * s[static_cast<int>(i)] + value[term[i]];
    return f;
  };
  std::function<void(std::size_t)> visit = [&](std::size_t d) {
    if (d == labels.size()) {
      double p = av[static_cast<std::size_t>(flat(in0, a.shape()))];
      if (b) p *= bv[static_cast<std::size_t>(flat(in1, b->shape()))];
      fx::index_t o = 0;
      for (char l : out) o = o * extent[l] + value[l];
      result[static_cast<std::size_t>(o)] += p;
      return;
    }
    for (fx::index_t v = 0; v < extent[labels[d]]; ++v) {
      value[labels[d]] = v;
      visit(d + 1);
    }
  };
  visit(0);
  return result;
}

void check_einsum_values(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("einsum: two operands against a naive loop") {
  struct example {
    std::string in0, in1, out;
    fx::shape a, b;
  };
  const std::vector<example> examples = {
      {"ij", "jk", "ik", {3, 4}, {4, 5}},          // matmul
      {"ij", "kj", "ik", {3, 4}, {5, 4}},          // a b^T
      {"bij", "bjk", "bik", {2, 3, 4}, {2, 4, 5}}, // batched
      {"bij", "jk", "bik", {2, 3, 4}, {4, 5}},     // one operand unbatched
      {"bhqd", "bhkd", "bhqk", {2, 3, 4, 5}, {2, 3, 6, 5}},  // attention scores
      {"bhqk", "bhkd", "bqhd", {2, 3, 4, 6}, {2, 3, 6, 5}},  // attention output, heads moved
      {"i", "j", "ij", {3}, {4}},                  // outer product
      {"i", "i", "", {5}, {5}},                    // dot product
      {"ij", "ij", "i", {3, 4}, {3, 4}},           // row-wise dot products
      {"ij", "ij", "ij", {3, 4}, {3, 4}},          // elementwise product
      {"ijk", "kl", "li", {2, 3, 4}, {4, 5}},      // j summed alone, output transposed
      {"ab", "cd", "dcab", {2, 3}, {4, 2}},        // outer product, reordered
      {"ij", "jk", "", {3, 4}, {4, 5}},            // everything summed
  };
  for (const auto& e : examples) {
    const std::string spec = e.in0 + "," + e.in1 + "->" + e.out;
    CAPTURE(spec);
    const auto a = test::random_tensor<double>(e.a, 1), b = test::random_tensor<double>(e.b, 2);
    fx::tensor<double> c = fx::einsum(spec, a, b);
    check_einsum_values(c.to_vector(), naive_einsum(e.in0, e.in1, e.out, a, &b));
  }
}

TEST_CASE("einsum: one operand, implicit outputs and ellipses") {
  const auto a = test::random_tensor<double>({2, 3, 4}, 3);
  for (const auto& [term, out] : std::vector<std::pair<std::string, std::string>>{
           {"ijk", "kji"}, {"ijk", "ik"}, {"ijk", ""}, {"ijk", "j"}, {"ijk", "ijk"}}) {
    CAPTURE(term + "->" + out);
    fx::tensor<double> c = fx::einsum(term + "->" + out, a);
    check_einsum_values(c.to_vector(), naive_einsum(term, "", out, a, nullptr));
  }
  // Implicit: the labels that appear once, alphabetically.
  check_einsum_values(fx::einsum("kij", a).to_vector(), naive_einsum("kij", "", "ijk", a, nullptr));
  const auto m = test::random_tensor<double>({4, 5}, 4);
  check_einsum_values(fx::einsum("ijk,kl", a, m).to_vector(), naive_einsum("ijk", "kl", "ijl", a, &m));
  // Ellipses broadcast at the end, as matmul's batch axes.
  const auto x = test::random_tensor<double>({3, 1, 4, 5}, 5), y = test::random_tensor<double>({2, 5, 6}, 6);
  fx::tensor<double> z = fx::einsum("...ij,...jk->...ik", x, y);
  fx::tensor<double> want = fx::matmul(x, y);
  CHECK(z.shape() == fx::shape{3, 2, 4, 6});
  check_einsum_values(z.to_vector(), want.to_vector());
  fx::tensor<double> implicit = fx::einsum("...ij,...jk", x, y);  // ... then i and k
  check_einsum_values(implicit.to_vector(), want.to_vector());
  fx::tensor<double> dropped = fx::einsum("...ij->ij", x);        // an ellipsis left out is summed
  check_einsum_values(dropped.to_vector(), fx::tensor<double>(fx::reduce_sum(x, {0, 1})).to_vector());
  fx::tensor<float> f = fx::einsum(" ij , jk -> ik ", fx::tensor<float>{{1, 2}}, fx::tensor<float>{{3}, {4}});  // spaces
  CHECK(f.to_vector() == std::vector<float>{11});
}

TEST_CASE("einsum: errors name the spec and the values") {
  const auto a = test::random_tensor<double>({2, 3}, 7), b = test::random_tensor<double>({4, 5}, 8);
  test::check_throws_with<fx::shape_error>([&] { (void)fx::einsum("ij,jk->ik", a, b); },
                                           "einsum: \"ij,jk->ik\": label 'j' has extent 3 in operand 0 (shape (2, 3)) and 4 in operand 1 (shape (4, 5))");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::einsum("ijk->i", a); },
                                           "einsum: \"ijk->i\": operand 0 has 3 labels for an operand of rank 2");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("ii->i", fx::tensor<double>(fx::reshape(b, {4, 5}))); },
                                                "einsum: \"ii->i\": label 'i' appears twice in operand 0; diagonals and traces are not supported");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("ij->ix", a); },
                                                "einsum: \"ij->ix\": the output's label 'x' is in no operand");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("ij,jk->ik", a); },
                                                "einsum: \"ij,jk->ik\" names 2 operands, but 1 were given");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("i2->i", a); }, "einsum: \"i2->i\": operand 0 has the character '2'");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("ij->..i", a); }, "has a '.' that is not one \"...\"");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("ij->...i", a); },
                                                "the output has \"...\" but no operand does");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("ij", fx::tensor<double>::none()); }, "einsum: an operand is none");
}
