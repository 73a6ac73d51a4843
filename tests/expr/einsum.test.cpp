#include "../test_util.hpp"

#include <functional>
#include <map>

// einsum against a naive loop over every label's values, for matmuls, batches, broadcasting
// ellipses, outer products, sums of one operand's own labels, transposes and implicit outputs;
// and its errors.

namespace {

/// einsum by brute force: every combination of label values, each product added to its output.
/// Labels are single letters and may repeat within a term (a diagonal); `...` is not handled here
/// (those specs are checked against matmul).
std::vector<double> naive_einsum(const std::vector<std::string>& terms, const std::string& out,
                                 const std::vector<fx::tensor<double>>& xs) {
  std::map<char, fx::index_t> extent;
  for (std::size_t k = 0; k < terms.size(); ++k)
    for (std::size_t i = 0; i < terms[k].size(); ++i) extent[terms[k][i]] = xs[k].shape()[static_cast<int>(i)];
  std::vector<char> labels;
  for (const auto& [l, e] : extent) labels.push_back(l);
  fx::index_t out_size = 1;
  for (char l : out) out_size *= extent[l];
  std::vector<double> result(static_cast<std::size_t>(out_size), 0.0);
  std::vector<std::vector<double>> values;
  for (const auto& x : xs) values.push_back(x.to_vector());
  std::map<char, fx::index_t> value;
  auto flat = [&](const std::string& term, const fx::shape& s) {
    fx::index_t f = 0;
    for (std::size_t i = 0; i < term.size(); ++i) f = f * s[static_cast<int>(i)] + value[term[i]];
    return f;
  };
  std::function<void(std::size_t)> visit = [&](std::size_t d) {
    if (d == labels.size()) {
      double p = 1;
      for (std::size_t k = 0; k < xs.size(); ++k) p *= values[k][static_cast<std::size_t>(flat(terms[k], xs[k].shape()))];
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
std::vector<double> naive_einsum(const std::string& in0, const std::string& in1, const std::string& out,
                                 const fx::tensor<double>& a, const fx::tensor<double>* b) {
  if (!b) return naive_einsum({in0}, out, {a});
  return naive_einsum({in0, in1}, out, {a, *b});
}

void check_einsum_values(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}

/// One einsum of 1 to 5 operands: terms, output labels and operand shapes, against naive_einsum.
struct einsum_example {
  std::vector<std::string> in;
  std::string out;
  std::vector<fx::shape> shapes;
};

void check_against_naive(const std::vector<einsum_example>& examples, unsigned seed) {
  for (const auto& e : examples) {
    std::string spec;
    for (const auto& t : e.in) spec += (spec.empty() ? "" : ",") + t;
    spec += "->" + e.out;
    CAPTURE(spec);
    std::vector<fx::tensor<double>> xs;
    for (std::size_t k = 0; k < e.shapes.size(); ++k) xs.push_back(test::random_tensor<double>(e.shapes[k], seed + static_cast<unsigned>(k)));
    fx::tensor<double> got;
    switch (xs.size()) {
      case 1: got = fx::einsum(spec, xs[0]); break;
      case 2: got = fx::einsum(spec, xs[0], xs[1]); break;
      case 3: got = fx::einsum(spec, xs[0], xs[1], xs[2]); break;
      case 4: got = fx::einsum(spec, xs[0], xs[1], xs[2], xs[3]); break;
      default: got = fx::einsum(spec, xs[0], xs[1], xs[2], xs[3], xs[4]); break;
    }
    check_einsum_values(got.to_vector(), naive_einsum(e.in, e.out, xs));
  }
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
  for (const auto& [term_, out_] : std::vector<std::pair<std::string, std::string>>{
           {"ijk", "kji"}, {"ijk", "ik"}, {"ijk", ""}, {"ijk", "j"}, {"ijk", "ijk"}}) {
    const auto& term = term_, &out = out_;  // clang 14 cannot capture a structured binding (CAPTURE)
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

TEST_CASE("einsum: three and more operands against a naive loop") {
  check_against_naive({
      {{"i", "ij", "j"}, "", {{4}, {4, 5}, {5}}},                          // a bilinear form
      {{"ij", "jk", "kl"}, "il", {{3, 4}, {4, 5}, {5, 2}}},                // a chain of matmuls
      {{"bij", "bjk", "bkl"}, "bli", {{2, 3, 4}, {2, 4, 5}, {2, 5, 3}}},   // batched, transposed
      {{"ab", "bc", "cd", "de"}, "ae", {{2, 3}, {3, 4}, {4, 2}, {2, 3}}},  // four operands
      {{"i", "j", "k"}, "kij", {{2}, {3}, {4}}},                           // no label shared
      {{"ij", "k", "jk"}, "i", {{3, 4}, {5}, {4, 5}}},                     // the first pair shares nothing
      {{"ijk", "jl", "kl"}, "il", {{2, 3, 4}, {3, 5}, {4, 5}}},            // j and k meet in different pairs
      {{"ij", "ij", "ij"}, "ij", {{3, 4}, {3, 4}, {3, 4}}},                // an elementwise product
      {{"abc", "cd", "bd"}, "", {{2, 3, 4}, {4, 5}, {3, 5}}},              // everything summed
      {{"ij", "jk", "kl", "lm", "mi"}, "", {{2, 3}, {3, 4}, {4, 2}, {2, 3}, {3, 2}}},  // the trace of a product
  }, 10);
  // Implicit output: the labels that appear once.
  const auto a = test::random_tensor<double>({3, 4}, 20), b = test::random_tensor<double>({4, 5}, 21),
             c = test::random_tensor<double>({5, 2}, 22);
  fx::tensor<double> implicit = fx::einsum("ij,jk,kl", a, b, c);
  CHECK(implicit.shape() == fx::shape{3, 2});
  check_einsum_values(implicit.to_vector(), naive_einsum({"ij", "jk", "kl"}, "il", {a, b, c}));
  // Expressions and float operands; the ellipsis broadcasts across all three.
  fx::tensor<float> f = fx::einsum("i,i,i", fx::tensor<float>{1, 2}, fx::tensor<float>{3, 4} * 1.f, fx::tensor<float>{5, 6});
  CHECK(f.to_vector() == std::vector<float>{1 * 3 * 5 + 2 * 4 * 6});
  const auto x = test::random_tensor<double>({3, 1, 2, 4}, 23), y = test::random_tensor<double>({2, 4, 5}, 24),
             z = test::random_tensor<double>({1, 5, 3}, 25);
  fx::tensor<double> chain = fx::einsum("...ij,...jk,...kl->...il", x, y, z);
  fx::tensor<double> want = fx::matmul(fx::tensor<double>(fx::matmul(x, y)), z);
  CHECK(chain.shape() == fx::shape{3, 2, 2, 3});
  check_einsum_values(chain.to_vector(), want.to_vector());
}

TEST_CASE("einsum: diagonals, traces and broadcast axes summed") {
  check_against_naive({
      {{"ii"}, "i", {{4, 4}}},                      // the diagonal
      {{"ii"}, "", {{4, 4}}},                       // the trace
      {{"bii"}, "bi", {{2, 3, 3}}},                 // batched diagonals
      {{"iij"}, "ji", {{3, 3, 2}}},                 // the diagonal of the leading axes, transposed
      {{"iji"}, "j", {{3, 2, 3}}},                  // apart, and summed
      {{"iii"}, "i", {{3, 3, 3}}},                  // three times
      {{"ijij"}, "ij", {{2, 3, 2, 3}}},             // two labels repeated
      {{"ij", "jj"}, "i", {{3, 4}, {4, 4}}},        // a diagonal in one operand of two
      {{"ii", "ii"}, "i", {{3, 3}, {3, 3}}},        // in both
      {{"ii", "ij", "jj"}, "", {{3, 3}, {3, 4}, {4, 4}}},  // in three operands
  }, 30);
  // Implicit: a label that repeats is summed, as NumPy's "ii" is the trace.
  const fx::tensor<double> m{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  CHECK(fx::einsum("ii", m).item() == 15);
  CHECK(fx::tensor<double>(fx::einsum("ii->i", m)).to_vector() == std::vector<double>{1, 5, 9});
  CHECK(fx::einsum("ij,ji", m, m).item() == doctest::Approx(261));  // trace(m m)
  // An ellipsis axis that broadcasts (1 against 2) and that the output drops is summed, as in NumPy.
  const auto x = test::random_tensor<double>({3, 1, 2, 4}, 40), y = test::random_tensor<double>({2, 4, 5}, 41);
  fx::tensor<double> summed = fx::einsum("...ij,...jk->ik", x, y);
  check_einsum_values(summed.to_vector(), fx::tensor<double>(fx::reduce_sum(fx::matmul(x, y), {0, 1})).to_vector());
}

TEST_CASE("einsum: errors name the spec and the values") {
  const auto a = test::random_tensor<double>({2, 3}, 7), b = test::random_tensor<double>({4, 5}, 8);
  test::check_throws_with<fx::shape_error>([&] { (void)fx::einsum("ij,jk->ik", a, b); },
                                           "einsum: \"ij,jk->ik\": label 'j' has extent 3 in operand 0 (shape (2, 3)) and 4 in operand 1 (shape (4, 5))");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::einsum("ijk->i", a); },
                                           "einsum: \"ijk->i\": operand 0 has 3 labels for an operand of rank 2");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::einsum("ii->i", b); },
                                           "einsum: \"ii->i\": label 'i' repeats in operand 0 (shape (4, 5)) with extents 4 and 5; "
                                           "a diagonal needs equal ones");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("ij->ii", a); },
                                                "einsum: \"ij->ii\": label 'i' appears twice in the output");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::einsum("ij,jk,kl->il", a, test::random_tensor<double>({3, 4}, 9), a); },
                                           "einsum: \"ij,jk,kl->il\": label 'k' has extent 4 in operand 1 (shape (3, 4)) and 2 "
                                           "in operand 2 (shape (2, 3))");
  test::check_throws_with<fx::shape_error>([&] {
    (void)fx::einsum("...i,...i", test::random_tensor<double>({2, 3}, 10), test::random_tensor<double>({4, 3}, 11));
  }, "einsum: \"...i,...i\": label '... axis 0 from the end' has extent 2 in operand 0 (shape (2, 3)) and 4 in operand 1 (shape (4, 3))");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::einsum("i,i,i", a, a); },
                                                "einsum: \"i,i,i\" names 3 operands, but 2 were given");
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
