package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// environmentPrefix starts the variable of every serve flag: --rate-per-key
// is LEDGER_RATE_PER_KEY.
const environmentPrefix = "LEDGER_"

// environmentFileSuffix ends the variable that names a file holding a secret
// flag's value: LEDGER_DB_FILE holds the database URL.
const environmentFileSuffix = "_FILE"

// secretAnnotation marks a flag whose value may be a secret (a database URL
// with its password): it may also come from the file named by its _FILE
// variable, so that the secret stays out of the process's environment and
// command line.
const secretAnnotation = "ledger_secret"

// environmentValueSizeMax bounds a secret file's contents.
const environmentValueSizeMax = 64 << 10

// environmentSkipped are flags with no variable: they only make sense typed.
var environmentSkipped = map[string]bool{"help": true, "version": true}

// environmentName is the variable of a flag: LEDGER_ and the flag's name
// upper-cased, dashes as underscores.
func environmentName(flag string) string {
	return environmentPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// markSecret lets a flag's value come from the file its _FILE variable names.
func markSecret(f *pflag.Flag) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[secretAnnotation] = []string{"true"}
}

func isSecret(f *pflag.Flag) bool { return len(f.Annotations[secretAnnotation]) > 0 }

// applyEnvironment sets every flag of cmd (its own and the global ones) that
// the command line did not set from its variable, and a secret flag from the
// file its _FILE variable names: flag > environment > default. A value the
// flag refuses, a secret given both ways or an unreadable file is a usage
// error (exit 2) that names the variable.
func (a *app) applyEnvironment(cmd *cobra.Command) error {
	if a.environment == nil {
		return nil
	}
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || environmentSkipped[f.Name] {
			return
		}
		err = a.applyVariable(cmd, f)
	})
	return err
}

// applyVariable sets one flag from its variable, or from its file.
func (a *app) applyVariable(cmd *cobra.Command, f *pflag.Flag) error {
	name := environmentName(f.Name)
	value, from := a.environment(name), name
	if isSecret(f) {
		fileVariable := name + environmentFileSuffix
		if path := a.environment(fileVariable); path != "" {
			if value != "" {
				return usageErrorf("$%s and $%s are both set: give one", name, fileVariable)
			}
			contents, err := readSecretFile(path)
			if err != nil {
				return usageErrorf("$%s: %v", fileVariable, err)
			}
			value, from = contents, fileVariable
		}
	}
	if value == "" {
		return nil
	}
	if a.fromEnvironment == nil {
		a.fromEnvironment = map[string]string{}
	}
	a.fromEnvironment[f.Name] = from
	if err := cmd.Flags().Set(f.Name, value); err != nil {
		shown := fmt.Sprintf("%q", value)
		if isSecret(f) {
			shown = "(secret)"
		}
		return usageErrorf("$%s %s: %v", from, shown, err)
	}
	return nil
}

// readSecretFile reads a secret's file: its contents without the trailing
// line break an editor leaves.
func readSecretFile(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() || info.Size() > environmentValueSizeMax {
		return "", fmt.Errorf("%s: want a regular file of at most %d bytes", path, environmentValueSizeMax)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	value := strings.TrimRight(string(b), "\r\n")
	if value == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return value, nil
}

// environmentHelp adds each flag's variable to its help line, once.
func environmentHelp(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if environmentSkipped[f.Name] || strings.Contains(f.Usage, "[env ") {
			return
		}
		name := environmentName(f.Name)
		if isSecret(f) {
			f.Usage += fmt.Sprintf(" [env %s or %s%s]", name, name, environmentFileSuffix)
		} else {
			f.Usage += fmt.Sprintf(" [env %s]", name)
		}
	})
}

// blameEnvironment adds to a usage error about a flag that its value came
// from a variable, so that the operator knows what to fix.
func (a *app) blameEnvironment(err error) error {
	if err == nil || len(a.fromEnvironment) == 0 {
		return err
	}
	if code, _ := classify(err); code != exitUsage {
		return err
	}
	message := err.Error()
	for flag, variable := range a.fromEnvironment {
		for _, after := range []string{" ", ":", "/"} {
			if strings.Contains(message, "--"+flag+after) {
				return fmt.Errorf("%w (set by $%s)", err, variable)
			}
		}
	}
	return err
}
