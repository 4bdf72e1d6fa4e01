#!/usr/bin/env Rscript
# Reference values for tests/test_stats_shared_encoder.py: the shared-encoder model, fitted by nlme + emmeans.
#
#   Rscript tests/data/shared_encoder_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/shared_encoder_fixture.csv -> tests/data/shared_encoder_reference.json (beside this script).
# Debian/Ubuntu: apt-get install r-base-core r-cran-nlme r-cran-emmeans r-cran-jsonlite
#
# Model (freezestats.stats.shared_encoder_contrasts, variance = "per_cell"): one task's runs alone and in a
# group; the setting is (trained_with, frozen_layers), with (alone, 0) and the smallest train size as
# reference levels; a residual variance per (setting, size) cell:
#   lme(heldout ~ setting * train_size, random = ~ 1 | seed / train_size,
#       weights = varIdent(form = ~ 1 | setting_size), method = "REML")
# Contrasts (emmeans' cell means of setting | train_size, custom coefficients; estimates and SEs only: emmeans
# cannot compute Satterthwaite df for this lme, "Unable to estimate Satterthwaite parameters", so its
# containment df are written but not compared):
#   together_vs_alone at frozen k:  group_k - alone_k
#   frozen_vs_0 in the group:       group_k - group_0
#   freezing_gain_difference:       (group_k - group_0) - (alone_k - alone_0)

suppressPackageStartupMessages({
  library(nlme)
  library(emmeans)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "shared_encoder_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "shared_encoder_reference.json")

d <- read.csv(fixture)
task <- unique(d$task)
stopifnot(length(task) == 1)
d$arm <- ifelse(d$trained_with == task, "alone", d$trained_with)
group <- setdiff(unique(d$arm), "alone")
stopifnot(length(group) == 1)
frozen <- sort(unique(d$frozen_layers))
settings <- c(paste0("alone@", frozen), paste0(group, "@", frozen))
d$setting <- factor(paste0(d$arm, "@", d$frozen_layers), levels = settings)
d$train_size <- factor(d$train_size, levels = sort(unique(as.integer(d$train_size))))
d$seed <- factor(d$seed)
d$setting_size <- interaction(d$setting, d$train_size, sep = "|")

fit <- lme(heldout ~ setting * train_size, random = ~ 1 | seed / train_size,
           weights = varIdent(form = ~ 1 | setting_size), data = d, method = "REML", control = lmeControl())

ratios <- coef(fit$modelStruct$varStruct, unconstrained = FALSE, allCoef = TRUE)
cell <- do.call(rbind, strsplit(names(ratios), "|", fixed = TRUE))
setting_parts <- do.call(rbind, strsplit(cell[, 1], "@", fixed = TRUE))
residual_sd <- data.frame(trained_with = ifelse(setting_parts[, 1] == "alone", task, setting_parts[, 1]),
                          frozen_layers = as.integer(setting_parts[, 2]), train_size = as.integer(cell[, 2]),
                          sd = unname(fit$sigma * ratios))
relative <- as.matrix(fit$modelStruct$reStruct)
random_sd <- list(seed = fit$sigma * sqrt(relative$seed[1, 1]),
                  `seed:train_size` = fit$sigma * sqrt(relative$train_size[1, 1]))

emm <- emmeans(fit, ~ setting | train_size, mode = "containment")
unit <- function(name) as.numeric(settings == name)
coefficients <- list()
for (k in frozen) {
  g_k <- unit(paste0(group, "@", k)); a_k <- unit(paste0("alone@", k))
  g_0 <- unit(paste0(group, "@", frozen[1])); a_0 <- unit(paste0("alone@", frozen[1]))
  coefficients[[paste0("together_vs_alone@", k)]] <- g_k - a_k
  if (k != frozen[1]) {
    coefficients[[paste0("frozen_vs_0@", k)]] <- g_k - g_0
    coefficients[[paste0("freezing_gain_difference@", k)]] <- (g_k - g_0) - (a_k - a_0)
  }
}
con <- as.data.frame(summary(contrast(emm, method = coefficients, adjust = "none")))
label <- do.call(rbind, strsplit(as.character(con$contrast), "@", fixed = TRUE))
contrasts <- data.frame(comparison = label[, 1], trained_with = group, frozen_layers = as.integer(label[, 2]),
                        train_size = as.integer(as.character(con$train_size)), estimate = con$estimate,
                        se = con$SE, df = con$df)

result <- list(
  r_version = R.version.string,
  nlme_version = as.character(packageVersion("nlme")),
  emmeans_version = as.character(packageVersion("emmeans")),
  model = paste("lme(heldout ~ setting * train_size, random = ~1 | seed/train_size,",
                "weights = varIdent(~1 | setting:train_size), REML)"),
  logLik = as.numeric(logLik(fit)),
  residual_sd = residual_sd,
  random_sd = random_sd,
  contrasts = contrasts
)
writeLines(toJSON(result, digits = NA, pretty = TRUE, auto_unbox = TRUE), output)
