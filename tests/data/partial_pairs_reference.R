#!/usr/bin/env Rscript
# Reference values for tests/test_stats_partial_pairs.py: the partly paired seed x item contrast of two cells
# (freezestats/stats/items/partial_pairs.py), written again from its formulas in base R, so that the Python
# arithmetic (index pairing, residual covariance, the expectation factor, truncation, Satterthwaite df) is checked
# against code that shares none of it.
#
#   Rscript tests/data/partial_pairs_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/partial_pairs_fixture.csv -> tests/data/partial_pairs_reference.json. The fixture holds per
# item 0/1 scores of cell A's and cell B's runs (columns cell, seed, item, value); runs of the same seed in both
# cells are the shared units. A unit's reported metric is its mean over the items.
# Written: the estimate, the seed and item variances with their df, the total SE and df, and the parts
# (r, v_D, sigma_A, sigma_B, kappa) the variances are built from.

suppressPackageStartupMessages(library(jsonlite))

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "partial_pairs_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "partial_pairs_reference.json")

d <- read.csv(fixture)
table_of <- function(cell) {
  x <- d[d$cell == cell, ]
  m <- xtabs(value ~ seed + item, data = x)
  matrix(as.numeric(m), nrow = nrow(m), dimnames = dimnames(m))
}
a <- table_of("A")
b <- table_of("B")
seeds_a <- rownames(a)
seeds_b <- rownames(b)
shared <- intersect(seeds_a, seeds_b)
n_a <- nrow(a)
n_b <- nrow(b)
n_ab <- length(shared)
n_items <- ncol(a)
y_a <- rowMeans(a)
y_b <- rowMeans(b)

# seeds: Var(mean A) + Var(mean B) - 2 Cov through the shared units, the covariance in correlation form
r <- if (n_ab >= 3) cor(y_a[shared], y_b[shared]) else 0
v_seed <- max(0, var(y_a) / n_a + var(y_b) / n_b - 2 * n_ab * r * sd(y_a) * sd(y_b) / (n_a * n_b))
df_seed <- min(n_a, n_b) - 1

# items: the per-item mean difference's variance less what the run x item noise adds to it
v_d <- var(colMeans(a) - colMeans(b))
double_centred <- function(x) sweep(sweep(x, 1, rowMeans(x)), 2, colMeans(x)) + mean(x)
e_a <- double_centred(a)
e_b <- double_centred(b)
sigma_a <- sum(e_a^2) / ((n_a - 1) * (n_items - 1))
sigma_b <- sum(e_b^2) / ((n_b - 1) * (n_items - 1))
factor <- n_ab * (1 - 1 / n_a - 1 / n_b + n_ab / (n_a * n_b))
kappa <- if (n_ab >= 2 && factor > 0) sum(e_a[shared, ] * e_b[shared, ]) / ((n_items - 1) * factor) else 0
noise <- sigma_a / n_a + sigma_b / n_b - 2 * n_ab * kappa / (n_a * n_b)
excess <- v_d - noise
if (excess > 0) {
  v_item <- excess / n_items
  df_noise <- (min(n_a, n_b) - 1) * (n_items - 1)
  df_item <- excess^2 / (v_d^2 / (n_items - 1) + noise^2 / df_noise)
} else {
  v_item <- 0
  df_item <- Inf
}
total <- v_seed + v_item
parts <- (if (v_seed > 0) v_seed^2 / df_seed else 0) + (if (is.finite(df_item)) v_item^2 / df_item else 0)

out <- list(
  R_version = R.version.string,
  n_a = n_a, n_b = n_b, n_shared = n_ab, n_items = n_items,
  estimate = mean(y_a) - mean(y_b),
  r = r, v_d = v_d, sigma_a = sigma_a, sigma_b = sigma_b, kappa = kappa,
  se_seed = sqrt(v_seed), df_seed = df_seed,
  se_item = sqrt(v_item), df_item = if (is.finite(df_item)) df_item else "Inf",
  se = sqrt(total), df = if (parts > 0) total^2 / parts else "Inf"
)
writeLines(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE), output)
