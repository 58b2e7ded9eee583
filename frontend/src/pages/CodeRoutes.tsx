import { useParams } from 'react-router'
import Code from './Code'
import History from './History'
import Pulls from './Pulls'
import NotFound from './NotFound'

// The repo's /-/<kind> pages: tree and blob (Code), commits and branches (History), pulls (Pulls).
export default function CodeRoutes() {
  const { kind } = useParams()
  switch (kind) {
    case 'tree':
    case 'blob':
      return <Code />
    case 'commits':
    case 'branches':
      return <History />
    case 'pulls':
      return <Pulls />
  }
  return <NotFound />
}
