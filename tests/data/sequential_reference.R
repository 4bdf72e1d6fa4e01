#!/usr/bin/env Rscript
# Reference values for tests/test_stats_sequential_r.py: one-sided group-sequential critical values of
# Lan-DeMets alpha spending from rpact, for every design in tests/data/sequential_designs.json (each spending
# kind x alpha x set of information rates):
#
#   getDesignGroupSequential(kMax = K, alpha = alpha, sided = 1, typeOfDesign = "asOF" | "asP" | "asHSD",
#                            informationRates = rates[, gammaA = gamma])
#
# "asOF" is the O'Brien-Fleming-type function 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)), "asP" the Pocock-type
# alpha log(1 + (e - 1) t), "asHSD" Hwang-Shih-DeCani's alpha (1 - exp(-gamma t)) / (1 - exp(-gamma)): the
# freezestats.stats.sequential.spending spends "obrien_fleming", "pocock" and "hwang_shih_decani(gamma)" (the
# gamma is read from the kind's name).
#
#   Rscript tests/data/sequential_reference.R [DESIGNS_JSON [OUTPUT_JSON]]
#
# Defaults: tests/data/sequential_designs.json -> tests/data/sequential_reference.json (next to this script).
# Debian/Ubuntu: apt-get install r-base-core r-cran-rpact r-cran-jsonlite

suppressPackageStartupMessages({
  library(rpact)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "sequential_designs.json")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "sequential_reference.json")

spec <- fromJSON(fixture, simplifyVector = FALSE)
designs <- list()
for (kind in names(spec$kinds)) {
  for (alpha in unlist(spec$alphas)) {
    for (rates_name in names(spec$information_rates)) {
      rates <- unlist(spec$information_rates[[rates_name]])
      type <- spec$kinds[[kind]]
      gamma <- if (type == "asHSD") as.numeric(sub("^hwang_shih_decani\\((.*)\\)$", "\\1", kind)) else NA
      d <- if (type == "asHSD") {
        getDesignGroupSequential(kMax = length(rates), alpha = alpha, sided = 1, typeOfDesign = type,
                                 informationRates = rates, gammaA = gamma)
      } else {
        getDesignGroupSequential(kMax = length(rates), alpha = alpha, sided = 1, typeOfDesign = type,
                                 informationRates = rates)
      }
      designs[[length(designs) + 1]] <- list(
        kind = kind, type_of_design = spec$kinds[[kind]], alpha = alpha, rates_name = rates_name,
        information_rates = rates, critical_values = d$criticalValues, alpha_spent = d$alphaSpent,
        stage_levels = d$stageLevels
      )
    }
  }
}

result <- list(
  r_version = R.version.string,
  rpact_version = as.character(packageVersion("rpact")),
  call = "getDesignGroupSequential(kMax, alpha, sided = 1, typeOfDesign, informationRates)",
  designs = designs
)
writeLines(toJSON(result, digits = NA, pretty = TRUE, auto_unbox = TRUE), output)
