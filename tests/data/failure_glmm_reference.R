#!/usr/bin/env Rscript
# Reference values for tests/test_stats_failure_pooled.py: the pooled failure model of the two-part contrasts,
# fitted by lme4::glmer (Laplace approximation, nAGQ = 1).
#
#   Rscript tests/data/failure_glmm_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/failure_glmm_fixture.csv -> tests/data/failure_glmm_reference.json. The fixture is written
# by tests/data/make_failure_glmm_fixture.py.
# Model: failed ~ 1 + (1 | cell) + (1 | frozen_layers) + (1 | train_size), binomial.
# Written: the intercept, the three SDs, the conditional modes per cell, level and size, and vcov(use.hessian = FALSE)
# (the fixed effects' covariance given the SDs: the beta block of the mixed-model equations' inverse).

suppressPackageStartupMessages({
  library(lme4)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "failure_glmm_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "failure_glmm_reference.json")

d <- read.csv(fixture)
d$cell <- factor(d$cell)
d$frozen_layers <- factor(d$frozen_layers)
d$train_size <- factor(d$train_size)
control <- glmerControl(optimizer = "bobyqa", tolPwrss = 1e-12, optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
fit <- glmer(failed ~ 1 + (1 | cell) + (1 | frozen_layers) + (1 | train_size), data = d, family = binomial,
             nAGQ = 1, control = control)
vc <- as.data.frame(VarCorr(fit))
re <- ranef(fit)
out <- list(
  lme4_version = as.character(packageVersion("lme4")),
  beta = unname(fixef(fit)),
  sd = list(cell = vc$sdcor[vc$grp == "cell"], level = vc$sdcor[vc$grp == "frozen_layers"],
            size = vc$sdcor[vc$grp == "train_size"]),
  modes_cell = setNames(as.list(re$cell[, 1]), rownames(re$cell)),
  modes_level = setNames(as.list(re$frozen_layers[, 1]), rownames(re$frozen_layers)),
  modes_size = setNames(as.list(re$train_size[, 1]), rownames(re$train_size)),
  vcov_conditional = unname(as.matrix(vcov(fit, use.hessian = FALSE))),
  deviance = -2 * as.numeric(logLik(fit))
)
write(toJSON(out, digits = NA, auto_unbox = TRUE, pretty = TRUE), output)
cat("wrote", output, "\n")
