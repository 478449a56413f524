package server

// MuxPatterns returns the patterns the handler's mux registers.
func (s *Server) MuxPatterns() []string {
	_, patterns := s.buildMux()
	return patterns
}
