#!/usr/bin/env Rscript
# Reference values for tests/test_stats_failure_pooled.py: the pooled failure model of one depth and the
# reference, as the task-level two-part contrast fits it, with the levels' SD given (2.5), not estimated.
#
#   Rscript tests/data/failure_glmm_pair_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/failure_glmm_fixture.csv -> tests/data/failure_glmm_pair_reference.json; the runs of
# frozen_layers 0 and 4 enter. lme4 cannot hold an SD fixed, so this is glmmTMB (Laplace, ML) with the level's
# log-SD mapped to log(2.5): failed ~ 1 + (1 | cell) + (1 | frozen_layers) + (1 | train_size), binomial.
# Written: the intercept, the three SDs, the conditional modes per cell, level and size, and the deviance.

suppressPackageStartupMessages({
  library(glmmTMB)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "failure_glmm_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "failure_glmm_pair_reference.json")
level_sd <- 2.5

d <- read.csv(fixture)
d <- d[d$frozen_layers %in% c(0, 4), ]
d$cell <- factor(d$cell)
d$frozen_layers <- factor(d$frozen_layers)
d$train_size <- factor(d$train_size)
fit <- glmmTMB(failed ~ 1 + (1 | cell) + (1 | frozen_layers) + (1 | train_size), data = d, family = binomial,
               map = list(theta = factor(c(1, NA, 2))), start = list(theta = c(0, log(level_sd), 0)),
               control = glmmTMBControl(optCtrl = list(iter.max = 1e4, eval.max = 1e4, rel.tol = 1e-14)))
sds <- sapply(VarCorr(fit)$cond, function(v) sqrt(v[1, 1]))
re <- ranef(fit)$cond
out <- list(
  glmmTMB_version = as.character(packageVersion("glmmTMB")),
  level_sd = level_sd,
  levels = c(0, 4),
  beta = unname(fixef(fit)$cond),
  sd = list(cell = unname(sds[["cell"]]), level = unname(sds[["frozen_layers"]]), size = unname(sds[["train_size"]])),
  modes_cell = setNames(as.list(re$cell[, 1]), rownames(re$cell)),
  modes_level = setNames(as.list(re$frozen_layers[, 1]), rownames(re$frozen_layers)),
  modes_size = setNames(as.list(re$train_size[, 1]), rownames(re$train_size)),
  deviance = -2 * as.numeric(logLik(fit))
)
write(toJSON(out, digits = NA, auto_unbox = TRUE, pretty = TRUE), output)
cat("wrote", output, "\n")
