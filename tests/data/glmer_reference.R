#!/usr/bin/env Rscript
# Reference values for tests/test_stats_laplace.py, from lme4::glmer (Laplace approximation, nAGQ = 1).
#
#   Rscript tests/data/glmer_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/glmer_fixture.csv -> tests/data/glmer_reference.json (next to this script). The fixture is
# written by tests/data/make_glmer_fixture.py.
# Debian/Ubuntu: apt-get install r-base-core r-cran-lme4 r-cran-jsonlite
#
# Models (the ones freezestats.stats.models.laplace.fit_binomial_laplace fits, same treatment coding: frozen_layers = 0
# and the smallest train_size are the reference levels):
#   common_run: cbind(n_correct, n_eval - n_correct) ~ factor(frozen_layers) * factor(train_size)
#                 + (1 | seed) + (1 | run)
#   run_only:   cbind(n_correct, n_eval - n_correct) ~ factor(frozen_layers) * factor(train_size) + (1 | run)
#   size_run:   cbind(n_correct, n_eval - n_correct) ~ factor(frozen_layers) * factor(train_size)
#                 + (1 | seed) + (0 + dummy(train_size, "50") | run) + (0 + dummy(train_size, "200") | run) + ...
#               (the run-level variance differs by train size; one variance per size)
# Term names are written in patsy's spelling ("frozen_layers[T.2]:train_size[T.200]") so the Python test can
# compare by name; random-effect SDs are named "seed", "run" and "run:<train_size>".
# "deviance" is -2 * logLik(fit): the Laplace approximation of -2 log L, binomial coefficients included.

suppressPackageStartupMessages({
  library(lme4)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "glmer_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "glmer_reference.json")

d <- read.csv(fixture)
frozen_levels <- c(0, setdiff(sort(unique(d$frozen_layers)), 0))
size_levels <- sort(unique(d$train_size))
d$frozen_layers <- factor(d$frozen_layers, levels = frozen_levels)
d$train_size <- factor(d$train_size, levels = size_levels)
d$seed <- factor(d$seed)
d$run <- factor(d$run)

# Tight tolerances so that the comparison measures the two implementations, not the optimizers' stopping rules:
# bobyqa's final trust-region radius rhoend (default 2e-7 in glmer's second stage) and PIRLS's relative tolerance
# on the penalised deviance tolPwrss (default 1e-7; each deviance evaluation is only that exact, and the Hessian
# behind vcov(use.hessian = TRUE) is a second difference of it). The observation-level (1 | run) term has as many
# levels as observations, which lme4's checks meant for Gaussian models reject; they are switched off.
control <- glmerControl(
  optimizer = "bobyqa",
  tolPwrss = 1e-12,
  optCtrl = list(rhoend = 1e-10, maxfun = 1e5),
  check.nobs.vs.nlev = "ignore",
  check.nobs.vs.nRE = "ignore",
  check.nobs.vs.rankZ = "ignore"
)

size_dummies <- paste0(sprintf('(0 + dummy(train_size, "%s") | run)', size_levels), collapse = " + ")
formulas <- list(
  common_run = "cbind(n_correct, n_eval - n_correct) ~ frozen_layers * train_size + (1 | seed) + (1 | run)",
  run_only = "cbind(n_correct, n_eval - n_correct) ~ frozen_layers * train_size + (1 | run)",
  size_run = paste(
    "cbind(n_correct, n_eval - n_correct) ~ frozen_layers * train_size + (1 | seed) +", size_dummies
  )
)

patsy_term <- function(name) {
  if (name == "(Intercept)") return("Intercept")
  parts <- strsplit(name, ":", fixed = TRUE)[[1]]
  parts <- sub("^frozen_layers(.*)$", "frozen_layers[T.\\1]", parts)
  parts <- sub("^train_size(.*)$", "train_size[T.\\1]", parts)
  paste(parts, collapse = ":")
}

# "seed", "run", or "run:<size>" for the dummy terms (lme4 names them "run", "run.1", ... in the order of the
# formula; the variable name tells the size).
sd_name <- function(grp, var1) {
  size <- sub('^dummy\\(train_size, "([^"]+)"\\)$', "\\1", var1)
  ifelse(var1 == "(Intercept)", sub("\\.[0-9]+$", "", grp), paste0("run:", size))
}

reference_of <- function(formula) {
  fit <- glmer(as.formula(formula), data = d, family = binomial, nAGQ = 1, control = control)
  beta <- fixef(fit)
  v_hess <- as.matrix(vcov(fit, use.hessian = TRUE))
  # vcov warns that the two differ by more than 1e-4 (relative); that difference is what se_conditional is for.
  v_cond <- as.matrix(suppressWarnings(vcov(fit, use.hessian = FALSE)))
  vc <- as.data.frame(VarCorr(fit))
  list(
    formula = formula,
    deviance = -2 * as.numeric(logLik(fit)),
    loglik = as.numeric(logLik(fit)),
    singular = isSingular(fit),
    optimizer_messages = fit@optinfo$conv$lme4$messages,
    fixed_effects = data.frame(
      term = vapply(names(beta), patsy_term, ""),
      estimate = unname(beta),
      se = unname(sqrt(diag(v_hess))),
      se_conditional = unname(sqrt(diag(v_cond))),
      row.names = NULL
    ),
    random_sd = data.frame(name = sd_name(vc$grp, vc$var1), sd = vc$sdcor, row.names = NULL),
    # conditional modes of the seed effects (ranef), in the order of the seeds' sorted values; absent without a
    # seed term
    seed_modes = if ("seed" %in% names(ranef(fit))) unname(ranef(fit)$seed[, 1]) else NULL
  )
}

reference <- list(
  meta = list(
    fixture = basename(fixture),
    reference_levels = "frozen_layers = 0, train_size = smallest",
    fit = "glmer(family = binomial, nAGQ = 1); se from vcov(use.hessian = TRUE), se_conditional from FALSE",
    control = "bobyqa, rhoend = 1e-10, maxfun = 1e5, tolPwrss = 1e-12",
    r_version = R.version.string,
    lme4 = as.character(packageVersion("lme4"))
  ),
  models = lapply(formulas, reference_of)
)
write_json(reference, output, digits = NA, auto_unbox = TRUE, pretty = TRUE, dataframe = "rows")
