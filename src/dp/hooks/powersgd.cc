// PowerSGD (Vogels et al., 2019), one power iteration per step with warm start. For each
// matrix M (rows x cols) of a bucket that compression makes smaller (r (rows + cols) <
// rows cols): M += error; P = M Q; AllReduce(avg) P; orthogonalize P; Q = M^T P; AllReduce(avg)
// Q; the averaged gradient is P Q^T, and error = M - P Q^T is added to the next step's
// gradient. Q stays for the next step (initialised from a seed every rank shares). Vectors and
// matrices left uncompressed travel as they are, in the same AllReduce as the P factors. The
// first `warmup` steps AllReduce the whole bucket uncompressed. P and Q are reduced by hoop,
// so every rank holds the same bits, and orthogonalization and P Q^T run the same loops
// everywhere: the averaged gradients are the same on every rank.
#include <cblas.h>

#include <cmath>

#include "core/errors.h"
#include "dp/hooks/hooks.h"

namespace hoop::dp::hooks {

void orthogonalize(float* p, size_t rows, size_t r) {
  for (size_t k = 0; k < r; ++k) {
    // Twice: when column k is nearly in the span of the others (a gradient of rank < r), one
    // pass leaves rounding noise that is not orthogonal to them; the second pass makes it so.
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t j = 0; j < k; ++j) {
        double dot = 0;
        for (size_t i = 0; i < rows; ++i) dot += static_cast<double>(p[i * r + j]) * p[i * r + k];
        const float d = static_cast<float>(dot);
        for (size_t i = 0; i < rows; ++i) p[i * r + k] -= d * p[i * r + j];
      }
    }
    double norm = 0;
    for (size_t i = 0; i < rows; ++i) norm += static_cast<double>(p[i * r + k]) * p[i * r + k];
    norm = std::sqrt(norm);
    const float inv = norm > 0 ? static_cast<float>(1.0 / norm) : 0.0f;
    for (size_t i = 0; i < rows; ++i) p[i * r + k] *= inv;
  }
}

namespace {

// A standard normal value per call, the same sequence for the same seed on every rank.
class SeededNormal {
 public:
  explicit SeededNormal(uint64_t seed) : s_(seed) {}
  float next() {
    const double u1 = (static_cast<double>(bits() >> 11) + 1.0) * 0x1p-53;  // (0, 1]
    const double u2 = static_cast<double>(bits() >> 11) * 0x1p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t bits() {  // splitmix64
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t s_;
};

struct Matrix {
  size_t offset = 0, rows = 0, cols = 0;  // in the bucket
  std::vector<float> q;                   // cols x r, kept across steps
  std::vector<float> error;               // rows x cols
};

struct Plain {
  size_t offset = 0, numel = 0;
};

struct BucketState {
  std::vector<Matrix> matrices;
  std::vector<Plain> plain;
  size_t plain_numel = 0, p_numel = 0, q_numel = 0;
};

class PowerSgdHook final : public CommHook {
 public:
  explicit PowerSgdHook(PowerSgdOptions o) : o_(o) {}
  std::string name() const override { return fmt::format("powersgd:{}", o_.rank); }

  void setup(const CommHookContext& ctx, const std::vector<GradBucket>& buckets) override {
    const size_t r = static_cast<size_t>(o_.rank);
    size_t largest = 0;
    std::string largest_name;
    for (const GradBucket& b : buckets) {
      BucketState st;
      for (const BucketTensor& t : b.tensors) {
        if (t.shape.size() == 2) {
          const size_t m = std::min(t.shape[0], t.shape[1]);
          if (m > largest) {
            largest = m;
            largest_name = t.name;
          }
        }
        if (t.shape.size() == 2 && r * (t.shape[0] + t.shape[1]) < t.numel) {
          Matrix m;
          m.offset = t.offset;
          m.rows = t.shape[0];
          m.cols = t.shape[1];
          m.q.resize(m.cols * r);
          SeededNormal normal(0x5eed0000ull + static_cast<uint64_t>(t.tensor));
          for (float& v : m.q) v = normal.next();
          m.error.assign(t.numel, 0.0f);
          st.p_numel += m.rows * r;
          st.q_numel += m.cols * r;
          st.matrices.push_back(std::move(m));
        } else {
          st.plain.push_back(Plain{t.offset, t.numel});
          st.plain_numel += t.numel;
        }
      }
      state_.push_back(std::move(st));
    }
    const ErrorContext where{ctx.rank, "dp.compress"};
    HOOP_CHECK_ARG(r <= largest, where,
                   "powersgd rank {} is larger than every matrix of the model (the largest, '{}', "
                   "has min(rows, cols) = {})", r, largest_name, largest);
  }

  void allreduce(const CommHookContext& ctx, GradBucket& b) override {
    BucketState& st = state_[static_cast<size_t>(b.index)];
    if (ctx.step < static_cast<uint64_t>(o_.warmup) || st.matrices.empty()) {
      allreduce_avg(ctx, b.data, b.numel, b.dtype);
      return;
    }
    const size_t r = static_cast<size_t>(o_.rank);
    grad_.resize(b.numel);
    load_f32(grad_.data(), b.data, b.dtype, b.numel);
    // One buffer: the P factors, then the uncompressed tensors.
    pq_.resize(std::max(st.p_numel + st.plain_numel, st.q_numel));
    size_t at = 0;
    for (Matrix& m : st.matrices) {
      float* M = m.error.data();
      const float* g = grad_.data() + m.offset;
      for (size_t i = 0; i < m.error.size(); ++i) M[i] += g[i];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m.rows),
                  static_cast<int>(r), static_cast<int>(m.cols), 1.0f, M, static_cast<int>(m.cols),
                  m.q.data(), static_cast<int>(r), 0.0f, pq_.data() + at, static_cast<int>(r));
      at += m.rows * r;
    }
    for (const Plain& p : st.plain) {
      std::copy(grad_.begin() + static_cast<std::ptrdiff_t>(p.offset),
                grad_.begin() + static_cast<std::ptrdiff_t>(p.offset + p.numel), pq_.begin() + static_cast<std::ptrdiff_t>(at));
      at += p.numel;
    }
    allreduce_avg(ctx, pq_.data(), at, DataType::f32);
    at = st.p_numel;
    for (const Plain& p : st.plain) {
      std::copy(pq_.begin() + static_cast<std::ptrdiff_t>(at), pq_.begin() + static_cast<std::ptrdiff_t>(at + p.numel),
                grad_.begin() + static_cast<std::ptrdiff_t>(p.offset));
      at += p.numel;
    }
    p_.assign(pq_.begin(), pq_.begin() + static_cast<std::ptrdiff_t>(st.p_numel));
    at = 0;
    for (Matrix& m : st.matrices) {
      float* p = p_.data() + at;
      orthogonalize(p, m.rows, r);
      at += m.rows * r;
    }
    at = 0;
    size_t pat = 0;
    for (Matrix& m : st.matrices) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(m.cols),
                  static_cast<int>(r), static_cast<int>(m.rows), 1.0f, m.error.data(),
                  static_cast<int>(m.cols), p_.data() + pat, static_cast<int>(r), 0.0f,
                  pq_.data() + at, static_cast<int>(r));
      at += m.cols * r;
      pat += m.rows * r;
    }
    allreduce_avg(ctx, pq_.data(), st.q_numel, DataType::f32);
    at = 0;
    pat = 0;
    for (Matrix& m : st.matrices) {
      std::copy(pq_.begin() + static_cast<std::ptrdiff_t>(at),
                pq_.begin() + static_cast<std::ptrdiff_t>(at + m.cols * r), m.q.begin());
      decompress(m, p_.data() + pat, r, grad_.data() + m.offset);
      at += m.cols * r;
      pat += m.rows * r;
    }
    store_f32(b.data, b.dtype, grad_.data(), b.numel);
  }

  std::vector<CommHookState> state() override {
    std::vector<CommHookState> out;
    for (size_t b = 0; b < state_.size(); ++b) {
      for (size_t i = 0; i < state_[b].matrices.size(); ++i) {
        Matrix& m = state_[b].matrices[i];
        const std::string id = fmt::format("bucket{}.matrix{}", b, i);
        out.push_back(CommHookState{id + ".q", &m.q, true});
        out.push_back(CommHookState{id + ".error", &m.error, false});
      }
    }
    return out;
  }

 private:
  // out = P Q^T (row by row, the same loop order on every rank); error -= out.
  void decompress(Matrix& m, const float* p, size_t r, float* out) {
    qt_.resize(r * m.cols);
    for (size_t j = 0; j < m.cols; ++j) {
      for (size_t k = 0; k < r; ++k) qt_[k * m.cols + j] = m.q[j * r + k];
    }
    for (size_t i = 0; i < m.rows; ++i) {
      float* row = out + i * m.cols;
      std::fill(row, row + m.cols, 0.0f);
      for (size_t k = 0; k < r; ++k) {
        const float pik = p[i * r + k];
        const float* qk = qt_.data() + k * m.cols;
        for (size_t j = 0; j < m.cols; ++j) row[j] += pik * qk[j];
      }
      float* e = m.error.data() + i * m.cols;
      for (size_t j = 0; j < m.cols; ++j) e[j] -= row[j];
    }
  }

  PowerSgdOptions o_;
  std::vector<BucketState> state_;
  std::vector<float> grad_, pq_, p_, qt_;
};

}  // namespace

std::shared_ptr<CommHook> make_powersgd(const PowerSgdOptions& o) {
  return std::make_shared<PowerSgdHook>(o);
}

}  // namespace hoop::dp::hooks
