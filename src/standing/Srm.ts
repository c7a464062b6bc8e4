/**
 * Sample-ratio mismatch: a χ² goodness-of-fit test of the exposed units per arm against the shares
 * the weights (and holdout) expect. A mismatch (p below 0.001, the bar GrowthBook and Statsig use)
 * means assignment or exposure logging is broken, and the arms' metrics cannot be trusted.
 */

/** The p-value below which the readout reports a mismatch. */
export const threshold = 0.001

/** The SRM check of a readout. `status` is `unknown` while no unit is exposed. */
export interface Result {
  readonly chi2: number
  readonly degreesOfFreedom: number
  readonly pValue: number | null
  readonly status: "ok" | "mismatch" | "unknown"
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9; relative error below 1e-13). */
const logGamma = (x: number): number => {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7
  ]
  if (x < 0.5) return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - logGamma(1 - x)
  const z = x - 1
  let sum = c[0]!
  for (let i = 1; i < 9; i++) sum += c[i]! / (z + i)
  const t = z + 7.5
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(sum)
}

/**
 * The regularized upper incomplete gamma Q(a, x): the series for x < a + 1, else Lentz's continued
 * fraction (Numerical Recipes 6.2), both to 1e-15. A dependency for this one function would pull
 * about two hundred packages; the tests check it against published χ² critical values.
 */
export const upperGamma = (a: number, x: number): number => {
  if (x <= 0) return 1
  const front = Math.exp(-x + a * Math.log(x) - logGamma(a))
  if (x < a + 1) {
    let term = 1 / a
    let sum = term
    for (let n = 1; n < 10_000; n++) {
      term *= x / (a + n)
      sum += term
      if (Math.abs(term) < Math.abs(sum) * 1e-15) break
    }
    return Math.max(0, 1 - sum * front)
  }
  const tiny = 1e-300
  let b = x + 1 - a
  let c = 1 / tiny
  let d = 1 / b
  let h = d
  for (let i = 1; i < 10_000; i++) {
    const an = -i * (i - a)
    b += 2
    d = an * d + b
    if (Math.abs(d) < tiny) d = tiny
    c = b + an / c
    if (Math.abs(c) < tiny) c = tiny
    d = 1 / d
    const delta = d * c
    h *= delta
    if (Math.abs(delta - 1) < 1e-15) break
  }
  return front * h
}

/** The upper tail of the χ² distribution: P(X ≥ chi2) with `df` degrees of freedom. */
export const chiSquaredSurvival = (chi2: number, df: number): number => chi2 <= 0 ? 1 : upperGamma(df / 2, chi2 / 2)

/** Tests observed counts against expected shares (which sum to 1). */
export const check = (arms: ReadonlyArray<{ readonly observed: number; readonly expectedShare: number }>): Result => {
  const total = arms.reduce((sum, arm) => sum + arm.observed, 0)
  const degreesOfFreedom = arms.length - 1
  if (total === 0 || degreesOfFreedom < 1) return { chi2: 0, degreesOfFreedom, pValue: null, status: "unknown" }
  let chi2 = 0
  for (const arm of arms) {
    const expected = total * arm.expectedShare
    chi2 += (arm.observed - expected) ** 2 / expected
  }
  const pValue = chiSquaredSurvival(chi2, degreesOfFreedom)
  return { chi2, degreesOfFreedom, pValue, status: pValue < threshold ? "mismatch" : "ok" }
}
