// fluxion::detail::function_ref<R(Args...)>: a non-owning reference to any callable, one pointer
// to it and one to a call function. Code that takes one is compiled once, whatever the callable:
// the thread pool's regions (one per fused statement's loop body), for_each_leaf (one per view
// type) and reads_any (one per expression type). The callable must outlive every call.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace fluxion::detail {

template <class Signature>
class function_ref;

template <class R, class... Args>
class function_ref<R(Args...)> {
 public:
  function_ref() = default;
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> && std::is_invocable_r_v<R, F&, Args...>)
  function_ref(F&& f) noexcept  // NOLINT(google-explicit-constructor): callers pass lambdas and functors
      : m_callable(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        m_call(&call<std::remove_reference_t<F>>) {}

  R operator()(Args... args) const { return m_call(m_callable, std::forward<Args>(args)...); }
  explicit operator bool() const noexcept { return m_call != nullptr; }

 private:
  template <class F>
  static R call(void* callable, Args... args) {
    return (*static_cast<F*>(callable))(std::forward<Args>(args)...);
  }

  void* m_callable = nullptr;
  R (*m_call)(void*, Args...) = nullptr;
};

}  // namespace fluxion::detail
