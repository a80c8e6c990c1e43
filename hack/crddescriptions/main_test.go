package main

import "testing"

func TestReflow(t *testing.T) {
	in := `    spec:
      description: |-
        Spec is what the user asks for: the cluster and
        the rules, checked at admission.

        Rules are:
        - get on pods, wrapped
          onto a second line
        - list on secrets
        An example:
          kubectl get kcr
      properties:
        name:
          description: one line
`
	want := `    spec:
      description: |-
        Spec is what the user asks for: the cluster and the rules, checked at admission.

        Rules are:
        - get on pods, wrapped onto a second line
        - list on secrets
        An example:
          kubectl get kcr
      properties:
        name:
          description: one line
`
	if got := Reflow(in); got != want {
		t.Errorf("Reflow:\n%s\nwant:\n%s", got, want)
	}
}
