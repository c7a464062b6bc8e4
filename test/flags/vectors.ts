/** The bucket test vectors of docs/flags.md, shared by the reference and the hot-path tests. */

/** The vectors published in docs/flags.md: [flagKey, unitId, murmur3 seed 0, rollout bucket, variant bucket]. */
export const vectors: ReadonlyArray<readonly [string, string, number, number, number]> = [
  ["new-checkout", "user-1", 2230340631, 631, 2755],
  ["new-checkout", "user-2", 992310789, 789, 2843],
  ["new-checkout", "user-42", 1499260774, 774, 6958],
  ["new-checkout", "tenant-acme", 419264419, 4419, 8416],
  ["dark-mode", "user-1", 2741246475, 6475, 8372],
  ["dark-mode", "josé", 2590158309, 8309, 883],
  ["dark-mode", "ユーザー42", 2671444460, 4460, 9396],
  ["dark-mode", "Josè", 3706096894, 6894, 4984],
  ["beta", "a", 1244378663, 8663, 7072],
  ["beta", "", 3074610844, 844, 8986]
]
